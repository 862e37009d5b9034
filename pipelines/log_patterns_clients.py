"""Client message texts per version: C++ (Python) 2.x-4.x, Java 2.10-4.2, Go 0.9-0.21.

Read from the projects' sources (`source` names the file and the versions compared); no code of
theirs is here, only the texts. Consumer lines carry the subscription and consumer id; the C++
client 3.2 and 3.3 print its topic's pointer instead of its name (`[0x55d1…, sub, 0] …`, the
`consumer_ref` group): pipelines.consumer_attribution puts the topic back.
"""

from __future__ import annotations

from pipelines.log_pattern_types import (
    CLIENT,
    JAVA_CLIENT,
    TOPIC,
    LogPattern,
    cpp_file,
    java_cls,
)

P = LogPattern
CPP = "pulsar-client-cpp"
JAVA = "pulsar pulsar-client/src/main/java/org/apache/pulsar/client/impl"
GO = "pulsar-client-go pulsar"
GO_LOGGER = r"^pulsar-client-go$"

# `[<topic>, <subscription>, <consumer id>] ` — and in C++ 3.2/3.3 the topic's pointer
CONSUMER = rf"^\[{TOPIC}, (?P<subscription>[^,\]]*), (?P<consumer_id>\d+)\] "
CONSUMER_REF = (
    r"^\[(?P<consumer_ref>0x[0-9a-f]+), (?P<subscription>[^,\]]*), (?P<consumer_id>\d+)\] "
)
CNX = r"(?P<connection>\[[^\]]*\])"
DELAY = r"(?P<delay_s>[\d.]+)"
# logrus fields, sorted by name after the message: `consumerID=1 name=… subscription=s topic="…"`
GO_TOPIC = rf'.*?\btopic="?{TOPIC}'
GO_CONSUMER = r'.*?\bconsumerID=(?P<consumer_id>\d+).*?\bsubscription="?(?P<subscription>[^\s"]+)'
GO_PRODUCER = r".*?\bproducerID=(?P<producer_id>\d+)"

# fmt: off
CLIENT_VERSION_PATTERNS: list[LogPattern] = [
    # ---- C++ client: consumers ([topic, subscription, id]; 3.2-3.3: [pointer, subscription, id])
    P("client_reconnect_scheduled", CLIENT, cpp_file("HandlerBase"),
      CONSUMER + rf"Schedule reconnection in {DELAY} s", "C++ 2.x-4.2: a consumer's reconnection",
      f"{CPP} lib/HandlerBase.cc, lib/ConsumerImpl.cc 2.2 (61628fd7), v3.1.0-v4.2.0"),
    P("client_reconnect_scheduled", CLIENT, cpp_file("HandlerBase"),
      CONSUMER_REF + rf"Schedule reconnection in {DELAY} s",
      "C++ 3.2-3.3 print the topic's shared_ptr in consumerStr_",
      f"{CPP} lib/ConsumerImpl.cc v3.2.0, v3.3.0 (topic_ is a std::shared_ptr<std::string>)"),
    P("client_consumer_created", CLIENT, cpp_file("ConsumerImpl"),
      CONSUMER_REF + rf"Created consumer on broker {CNX}", "C++ 3.2-3.3",
      f"{CPP} lib/ConsumerImpl.cc v3.2.0, v3.3.0"),
    P("client_consumer_closed", CLIENT, cpp_file("ConsumerImpl"),
      CONSUMER_REF + r"Closed consumer (?P<closed_id>\d+)", "C++ 3.2-3.3",
      f"{CPP} lib/ConsumerImpl.cc v3.2.0, v3.3.0"),
    P("client_consumer_closing", CLIENT, cpp_file("ConsumerImpl"),
      CONSUMER_REF + r"Closing consumer for topic 0x[0-9a-f]+", "C++ 3.2-3.3",
      f"{CPP} lib/ConsumerImpl.cc v3.2.0, v3.3.0"),
    P("client_consumer_closing", CLIENT, cpp_file("ConsumerImpl"),
      CONSUMER + r"Closing consumer for topic \S+", "C++ 2.x-4.2",
      f"{CPP} lib/ConsumerImpl.cc v3.1.0, v3.4.0-v4.2.0"),
    P("client_consumer_disconnected", CLIENT, cpp_file("ConsumerImpl"),
      r"^Broker notification of Closed consumer: (?P<consumer_id>\d+)",
      "C++ 3.1-4.2 (no topic in the text: attributed through the consumer id)",
      f"{CPP} lib/ConsumerImpl.cc v3.1.0-v4.2.0"),
    # ---- C++ client 2.x (before 2.6: no thread id, no producer id on close)
    P("client_producer_closed", CLIENT, cpp_file("ProducerImpl"),
      rf"^\[{TOPIC}, (?P<producer>[^\]]*)\] Closed producer\s*$", "C++ 2.x",
      f"{CPP} lib/ProducerImpl.cc 2.2 (61628fd7)"),
    P("client_connection_closed", CLIENT, cpp_file("ClientConnection"),
      rf"^{CNX} Connection closed\s*$", "C++ 2.x",
      f"{CPP} lib/ClientConnection.cc 2.2 (61628fd7)"),
    # ---- Java client (log4j2 / logback; logger org.apache.pulsar.client.impl.*)
    P("client_consumer_created", JAVA_CLIENT, java_cls("ConsumerImpl"),
      rf"^\[{TOPIC}\]\[(?P<subscription>[^\]]*)\] Subscribed to topic on (?P<connection>\S+)"
      r"(?: -> \S+)? -- consumer: (?P<consumer_id>\d+)", "Java 2.10-4.2",
      f"{JAVA}/ConsumerImpl.java 2.10.1 L1010; reference 3.0-4.2"),
    P("client_consumer_closed", JAVA_CLIENT, java_cls("ConsumerImpl"),
      rf"^\[{TOPIC}\] \[(?P<subscription>[^\]]*)\] Closed consumer", "Java 2.10-4.2",
      f"{JAVA}/ConsumerImpl.java 2.10.1 L1165"),
    P("client_producer_closed", JAVA_CLIENT, java_cls("ProducerImpl"),
      rf"^\[{TOPIC}\] \[(?P<producer>[^\]]*)\] Closed Producer", "Java 2.10-4.2",
      f"{JAVA}/ProducerImpl.java 2.10.1 L1088; reference L1257@4.2"),
    P("client_producer_disconnected", JAVA_CLIENT, java_cls("ClientCnx"),
      r"^\[(?P<connection>[^\]]*)\] Broker notification of [Cc]losed producer: "
      r"(?P<producer_id>\d+)", "Java 2.10-3.x 'Closed', 4.0+ 'closed …, assignedBrokerUrl'",
      f"{JAVA}/ClientCnx.java 2.10.1 L739; reference L851@4.2"),
    P("client_consumer_disconnected", JAVA_CLIENT, java_cls("ClientCnx"),
      r"^\[(?P<connection>[^\]]*)\] Broker notification of [Cc]losed consumer: "
      r"(?P<consumer_id>\d+)", "Java 2.10-3.x 'Closed', 4.0+ 'closed …, assignedBrokerUrl'",
      f"{JAVA}/ClientCnx.java 2.10.1 L751; reference L881@4.2"),
    P("client_connection_closed", JAVA_CLIENT, java_cls("ClientCnx"),
      r"^(?P<connection>\[id: [^\]]*\]) Disconnected", "Java 2.10-4.2 (netty channel)",
      f"{JAVA}/ClientCnx.java 2.10.1 L272; reference L335@4.2"),
    P("client_resend", JAVA_CLIENT, java_cls("ProducerImpl"),
      rf"^\[{TOPIC}\] \[(?P<producer>[^\]]*)\] Re-Sending (?P<messages>\d+) messages to server",
      "Java 3.0-4.2: pending messages resent after a reconnection",
      f"{JAVA}/ProducerImpl.java reference L2193@4.2"),
    # ---- Go client (logrus; fields after the message)
    P("client_reconnect_scheduled", CLIENT, GO_LOGGER,
      r"^Reconnecting to broker in (?P<delay>\S+?)(?:\s|$)" + GO_CONSUMER + GO_TOPIC,
      "Go 0.9-0.14: a consumer", f"{GO}/consumer_partition.go v0.9.0, v0.12.0"),
    P("client_reconnect_scheduled", CLIENT, GO_LOGGER,
      r"^Reconnecting to broker in (?P<delay>\S+?)(?:\s|$)" + GO_TOPIC,
      "Go 0.9-0.14: a producer", f"{GO}/producer_partition.go v0.9.0, v0.12.0"),
    P("client_reconnect_scheduled", CLIENT, GO_LOGGER,
      r"^Reconnecting to broker\b.*?\bconsumerID=(?P<consumer_id>\d+)"
      r".*?\bdelayReconnectTime=(?P<delay>\S+).*?\bsubscription=\"?(?P<subscription>[^\s\"]+)"
      + GO_TOPIC,
      "Go 0.15-0.21: a consumer (fields sorted by name)",
      f"{GO}/consumer_partition.go v0.15.0, v0.21.0"),
    P("client_reconnect_scheduled", CLIENT, GO_LOGGER,
      r"^Reconnecting to broker\b.*?\bdelayReconnectTime=(?P<delay>\S+)" + GO_TOPIC,
      "Go 0.15-0.21: a producer", f"{GO}/producer_partition.go v0.15.0, v0.21.0"),
    P("client_consumer_created", CLIENT, GO_LOGGER, r"^Created consumer\b" + GO_CONSUMER + GO_TOPIC,
      "Go 0.9-0.21", f"{GO}/consumer_partition.go v0.9.0-v0.21.0"),
    P("client_consumer_closed", CLIENT, GO_LOGGER, r"^Closed consumer\b" + GO_CONSUMER + GO_TOPIC,
      "Go 0.9-0.21", f"{GO}/consumer_partition.go v0.9.0-v0.21.0"),
    P("client_producer_created", CLIENT, GO_LOGGER,
      r"^Created producer\b.*?\bcnx=(?P<connection>\S+)" + GO_PRODUCER + GO_TOPIC,
      "Go 0.9-0.21", f"{GO}/producer_partition.go v0.9.0-v0.21.0"),
    P("client_producer_closed", CLIENT, GO_LOGGER, r"^Closed producer\b" + GO_PRODUCER + GO_TOPIC,
      "Go 0.9-0.21", f"{GO}/producer_partition.go v0.9.0-v0.21.0"),
    P("client_connection_closed", CLIENT, GO_LOGGER,
      r"^Connection was closed\b.*?\bcnx=(?P<connection>\S+)" + GO_TOPIC,
      "Go 0.9-0.21: the producer's connection", f"{GO}/producer_partition.go v0.9.0-v0.21.0"),
]
# fmt: on
