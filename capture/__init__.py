"""A real Apache Pulsar on this machine and a harness that captures traces from it (issue 5)."""
