"""What people downstream of gold use: alerts to sinks, forensic queries, the HTML report.

A stage of its own because it only reads the contract tables (never builds them) and reaches
outside the lakehouse (Pulsar, HTTP, files, browsers); it imports the core, no other stage.
"""
