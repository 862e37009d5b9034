"""Log message patterns → infrastructure event types: data, not code.

One row per known message text. A new Pulsar/BookKeeper version's texts are a change to
PATTERNS only. Rows are tried in order; the first match wins, so specific forms come first.

* `logger`: regex on the logger (log4j2 full class name, BookKeeper's caller class, or the
  C++ client's source file base name) — searched, so `(^|\\.)Name$` pins a class.
* `message`: regex searched in the entry's message, with named groups. Groups with a column
  of their own: topic, ml (managed-ledger name, turned into a topic), bundle, ledger_id,
  bookie. Every other group goes into the event's `detail` (JSON).
* `notes`: versions and what was seen in real logs. "4.0.7 seen" = confirmed on the real
  Pulsar 4.0.7 / BookKeeper 4.17.2 logs captured here; the rest comes from the sources
  listed in the reference (pulsar-log-facts.md) and is not yet confirmed on a real log.
"""

from __future__ import annotations

from pipelines.log_pattern_types import (
    BUNDLE,
    CLIENT,
    COLUMN_GROUPS,
    JAVA_CLIENT,
    LEDGER,
    ML,
    SERVER,
    TOPIC,
    LogPattern,
    cls,
)
from pipelines.log_patterns_clients import CLIENT_VERSION_PATTERNS
from pipelines.log_patterns_servers import SERVER_VERSION_PATTERNS

__all__ = ["COLUMN_GROUPS", "PATTERNS", "LogPattern"]

P = LogPattern
# fmt: off
PATTERNS: list[LogPattern] = [
    # ---- bundle unload and ownership (broker, ModularLoadManager / ZooKeeper locks)
    P("bundle_unload_requested", SERVER, cls("NamespacesBase"),
      rf"^\[[^\]]*\] Unloading namespace bundle {BUNDLE}", "3.0-4.2; 4.0.7 seen"),
    P("bundle_unload_started", SERVER, cls("OwnedBundle"),
      rf"^Disabling ownership: {BUNDLE}", "3.0-4.2; 4.0.7 seen"),
    P("bundle_unload_finished", SERVER, cls("OwnedBundle"),
      rf"^Unloading {BUNDLE} namespace-bundle with (?P<topics>\d+) topics completed in "
      r"(?P<duration_ms>[\d.]+) ms", "3.0-4.2; 4.0.7 seen ('73.0 ms')"),
    P("bundle_unload_finished", SERVER, cls("ServiceUnitStateChannelImpl"),
      rf"^Unloading bundle:{BUNDLE} with (?P<topics>\d+) topics completed in "
      r"(?P<duration_ms>[\d.]+) ms", "extensible load manager 4.0-4.2"),
    P("bundle_transfer_started", SERVER, cls("ServiceUnitStateChannelImpl"),
      rf"^\S+ handled Transfer:Releasing event for serviceUnit:{BUNDLE}, "
      r"cur:ServiceUnitStateData\[state=Releasing, dstBroker=(?P<to_broker>[^,\]]+)",
      "extensible load manager (PIP-192); 4.0.7 seen (issue 11: `chaos study` transfer)"),
    P("bundle_transferred", SERVER, cls("ServiceUnitStateChannelImpl"),
      rf"^\S+ handled Transfer:Owned event for serviceUnit:{BUNDLE}, "
      r"cur:ServiceUnitStateData\[state=Owned, dstBroker=(?P<to_broker>[^,\]]+)",
      "extensible load manager (PIP-192); 4.0.7 seen (issue 11: `chaos study` transfer)"),
    P("bundle_unload_timeout", SERVER, cls("BrokerService"),
      rf"^Unloading of {BUNDLE} has timed out", "3.0-4.2"),
    P("bundle_ownership_acquired", SERVER, cls("OwnershipCache"),
      rf"^Successfully acquired ownership of (?:OwnedBundle\(bundle=)?{BUNDLE}",
      "reference: bare bundle; 4.0.7 seen: 'OwnedBundle(bundle=…, isActive=1)'"),
    P("bundle_ownership_released", SERVER, cls("LockManagerImpl"),
      rf"^Released resource lock on /namespace/{BUNDLE}", "4.0-4.2; 4.0.7 seen"),
    P("bundle_lock_expired", SERVER, cls("OwnershipCache"),
      rf"^Resource lock for /namespace/{BUNDLE} has expired",
      "4.0.7 seen in every normal unload (not by itself a failure)"),
    P("bundle_lock_lost", SERVER, cls("ResourceLockImpl"),
      rf"^Failed to revalidate the lock at /namespace/{BUNDLE}\. Marked as expired",
      "4.0-4.2; 4.0.7 seen (issue 11: a broker cut off from ZooKeeper past its session, on "
      "reconnecting; the bundle is unloaded right after)"),
    P("bundle_ownership_lost", SERVER, cls("OwnershipCache"),
      rf"^Detected ownership loss for broker \[.*\] on namespace bundle \[{BUNDLE}\]",
      "reference: new in 4.1; 4.0.7 seen (a killed broker restarted on the same address)"),
    P("bundle_shedding", SERVER, cls("ModularLoadManagerImpl"),
      rf"^\[(?P<strategy>\w+)\] Unloading bundle: {BUNDLE} from broker (?P<from_broker>\S+)",
      "3.0; 4.0+ adds 'to dest broker {}'"),
    P("bundle_split", SERVER, cls("ModularLoadManagerImpl", "Namespaces"),
      rf"Successfully split namespace bundle {BUNDLE}", "3.0-4.2"),
    P("bundle_topics_loaded", SERVER, cls("PulsarService"),
      rf"^Loaded (?P<topics>\d+) topics on {BUNDLE} -- time taken: (?P<duration_s>[\d.]+) seconds",
      "4.0.7 seen (not in the reference)"),
    # ---- topics
    P("topic_unloading", SERVER, cls("BrokerService"), rf"^\[{TOPIC}\] Unloading topic",
      "3.0-4.2; 4.0.7 seen"),
    P("topic_closed", SERVER, cls("PersistentTopic"), rf"^\[{TOPIC}\] Topic closed",
      "3.0-4.2; 4.0.7 seen"),
    P("topic_fenced", SERVER, cls("PersistentTopic"),
      rf"^\[{TOPIC}\] Failed to persist msg in store: (?P<reason>.*)",
      "3.0-4.2: logged after fence() on a BookKeeper write failure"),
    P("topic_fenced", SERVER, cls("AbstractTopic"),
      rf"^\[{TOPIC}\] Attempting to add producer to a fenced topic", "3.0-4.2"),
    P("topic_fence_timeout", SERVER, cls("PersistentTopic"),
      rf"^\[{TOPIC}\] Topic remained fenced for (?P<duration_s>\d+) seconds", "3.0-4.2"),
    P("topic_unfenced", SERVER, cls("PersistentTopic"), rf"^\[{TOPIC}\] Un-fencing topic",
      "3.0-4.2"),
    P("topic_loaded", SERVER, cls("BrokerService"),
      rf"^Created topic {TOPIC} - dedup is (?P<dedup>\w+)",
      "3.0-4.1; 4.2 appends ' (latency: …)'; 4.0.7 seen"),
    # ---- managed ledgers and BookKeeper ledgers
    P("managed_ledger_opened", SERVER, cls("ManagedLedgerImpl"), rf"^Opening managed ledger {ML}",
      "3.0-4.2; 4.0.7 seen"),
    P("managed_ledger_closed", SERVER, cls("ManagedLedgerImpl"),
      rf"^\[{ML}\] Closing managed ledger", "3.0-4.2; 4.0.7 seen"),
    P("managed_ledger_fenced", SERVER, cls("ManagedLedgerImpl"), rf"^{ML} Moving to Fenced state",
      "3.0-4.2: z-node version mismatch, another broker owns the topic"),
    P("ledger_created", SERVER, cls("ManagedLedgerImpl"),
      rf"^\[{ML}\] Created ledger {LEDGER} after closed (?P<previous_ledger>\S+)",
      "4.0+ (first ledger on open); 4.0.7 seen"),
    P("ledger_created", SERVER, cls("ManagedLedgerImpl"),
      rf"^\[{ML}\] Created (?:new )?ledger {LEDGER}",
      "'Created new ledger' = rollover 3.0-4.2; 'Created ledger {}' = open, 3.0"),
    P("ledger_ensemble", SERVER, cls("LedgerCreateOp"),
      rf"^Ensemble: \[(?P<bookie>[^\]]*)\] for ledger: {LEDGER}",
      "BK 4.16-4.17; 4.0.7 seen ('[bk0test]', two bookies on the cluster)"),
    P("ledger_closed", SERVER, cls("OpAddEntry"),
      rf"^\[{ML}\] Closing ledger {LEDGER} for being full", "rollover trigger, 3.0-4.2"),
    P("ledger_closed", SERVER, cls("ManagedLedgerImpl"),
      rf"^\[{ML}\] Creating a new ledger after closed {LEDGER}",
      "4.0+ (3.0 has no id); rollover or after a write failure"),
    P("ledger_recovery", SERVER, cls("ReadOnlyLedgerHandle"),
      rf"^Closing recovered ledger {LEDGER} at entry (?P<entry_id>-?\d+)",
      "BK 4.16-4.17; 4.0.7 seen (a restarted broker reopening its topics)"),
    P("ledger_recovery", SERVER, cls("ReplicationWorker"),
      rf"Opening Ledger {LEDGER} for Recovery", "BK 4.16-4.17 auto-recovery fences open ledgers"),
    P("ledger_fenced", SERVER, cls("ReadEntryProcessor"),
      rf"^Ledger: {LEDGER}\s+fenced by: (?P<remote>\S+)",
      "bookie, V2 protocol; two spaces; 4.0.7 seen (recovery after a broker kill)"),
    P("ledger_fenced", SERVER, cls("ReadEntryProcessorV3"),
      rf"^Ledger fence request received for ledger: {LEDGER} from address: (?P<remote>\S+)",
      "bookie, V3 protocol"),
    P("ledger_fenced", SERVER, cls("WriteEntryProcessor"),
      rf"^Write attempt on fenced(?:/deleted)? ledger {LEDGER} by client (?P<remote>\S+)",
      "bookie; '/deleted' from BK 4.17.3"),
    P("ledger_fenced", SERVER, cls("PendingAddOp"),
      rf"^Fencing exception on write: L{LEDGER} E(?P<entry_id>\d+) on (?P<bookie>\S+)",
      "BK client: the old owner writes to a fenced ledger"),
    P("new_ensemble", SERVER, cls("LedgerHandle"),
      rf"^New Ensemble: \[(?P<bookie>[^\]]*)\] for ledger: {LEDGER}",
      "BK 4.16-4.17; 4.0.7 seen (bookie killed)"),
    P("bookie_replaced", SERVER, cls("BookieWatcherImpl"),
      r"^replaceBookie for bookie: (?P<bookie>\S+) in ensemble: \[(?P<ensemble>[^\]]*)\] "
      r"is not adhering to placement policy and chose (?P<replacement>\S+?)\. excludedBookies",
      "BK 4.16-4.17; 4.0.7 seen (not in the reference): WARN only when the new ensemble breaks "
      "the placement policy (always on one rack); bookie = the replaced one"),
    P("ensemble_placement_warning", SERVER, cls("BookieWatcherImpl"),
      r"^New ensemble: \[(?P<bookie>[^\]]*)\] is not adhering to Placement Policy",
      "4.0.7 seen at ledger creation (not a bookie replacement)"),
    P("bookie_write_error", SERVER, cls("PendingAddOp"),
      rf"^Write of ledger entry to quorum failed: L{LEDGER} E(?P<entry_id>\d+)",
      "BK 4.16-4.17; 4.0.7 seen ('L3 E41279', one line per pending entry)"),
    P("bookie_write_error", SERVER, cls("PendingAddOp"),
      rf"^Failed to write entry \({LEDGER}, (?P<entry_id>\d+)\) to bookie \((?P<bookie_index>\d+), "
      r"(?P<bookie>[^)]+)\): (?P<reason>.*)",
      "BK 4.16-4.17; 4.0.7 seen ('Bookie handle is not available', bookie killed)"),
    P("ledger_read_failed", SERVER, cls("PendingReadOp"),
      rf"^Read of ledger entry failed: L{LEDGER} E(?P<entry_id>\d+)-E(?P<last_entry>\d+), "
      r"Sent to \[(?P<bookie>[^\]]*)\], Heard from \[(?P<heard_from>[^\]]*)\] : bitset = "
      r"\{[^}]*\}, Error = '(?P<reason>[^']*)'",
      "BK 4.17.2; 4.0.7 seen (issue 11: every bookie of the fragment killed, reads blocked)"),
    P("ledger_read_failed", SERVER, cls("OpReadEntry"),
      rf"^\[{ML}\]\[(?P<cursor>[^\]]+)\] read failed from ledger at position:{LEDGER}:"
      r"(?P<entry_id>\d+)", "4.0.7 seen (issue 11: the reader's read of an unreadable fragment)"),
    P("ledger_skipped_lost", SERVER, cls("ManagedCursorImpl"),
      rf"^\[{ML}\] \[(?P<cursor>[^\]]+)\] Since the ledger \[{LEDGER}\] is lost and the "
      r"autoSkipNonRecoverableData is true, this ledger will be auto acknowledge",
      "4.0.7 seen (issue 27: the write quorum's disks wiped, brokers with "
      "autoSkipNonRecoverableData=true): the subscription acknowledges the lost ledger unread"),
    P("cursor_recovered", SERVER, cls("ManagedCursorImpl"),
      rf"^\[{ML}\] Cursor (?P<cursor>\S+) recovered to position {LEDGER}:(?P<entry_id>\d+)$",
      "2.10.2 and 2.10.3 seen (issue 27 item 3, apache/pulsar#18236: the topic's new owner "
      "recovered a subscription that had read nothing to 1:0 on 2.10.2, to 1:-1 on 2.10.3); "
      "only a position at or past an entry (E >= 0): the entries up to it count as consumed"),
    P("bookie_unreachable", SERVER, cls("PerChannelBookieClient"),
      r"^Cannot connect to (?P<bookie>\S+) as endpoint resolution failed",
      "BK 4.17.2; 4.0.7 seen (issue 11: a killed bookie, its registration gone or not)"),
    P("bookie_quarantined", SERVER, cls("BookieWatcherImpl"),
      r"^Bookie (?P<bookie>\S+) has been quarantined", "BK 4.16-4.17"),
    # ---- bookie membership (broker's registration client, bookie side)
    P("bookie_registered", SERVER, cls("PulsarRegistrationClient"),
      r"^Bookie (?P<bookie>\S+) created\. path: (?P<path>\S+)", "4.0+; 4.0.7 seen"),
    P("bookie_lost", SERVER, cls("PulsarRegistrationClient"),
      r"^Bookie (?P<bookie>\S+) (?:deleted\. path: (?P<path>\S+)|disappeared)",
      "'deleted. path:' 4.0+, 4.0.7 seen; 'disappeared' 3.0"),
    P("bookie_read_only", SERVER, cls("PulsarRegistrationClient", "ZKRegistrationClient"),
      r"^Update BookieInfoCache \(readonly bookie\) (?P<bookie>\S+)", "4.0+ and BK driver"),
    P("bookie_registered", SERVER, cls("PulsarRegistrationClient", "ZKRegistrationClient"),
      r"^Update BookieInfoCache \(writable bookie\) (?P<bookie>\S+)",
      "4.0.7 seen ('bk0test'), repeated per cache refresh"),
    P("bookie_registered", SERVER, cls("PulsarRegistrationManager"),
      r"^RegisterBookie (?P<bookie>\S+) readOnly (?P<read_only>\w+)",
      "bookie, metadata-store driver; 4.0.7 seen"),
    P("bookie_registered", SERVER, cls("BookieStateManager"), r"^Re-registering the bookie",
      "BK 4.16-4.17; 4.0.7 seen at every start"),
    P("bookie_read_only", SERVER, cls("BookieStateManager"),
      r"^Transitioning Bookie to ReadOnly mode", "BK 4.16-4.17"),
    P("bookie_read_only", SERVER, cls("Bookie", "BookieImpl"),
      r"^Turning bookie to read only during shut down", "4.0.7 seen (not in the reference)"),
    P("bookie_writable", SERVER, cls("BookieStateManager"),
      r"^Transitioning Bookie to Writable mode", "BK 4.16-4.17"),
    P("bookie_lost", SERVER, cls("AuditorBookieCheckTask", "Auditor"),
      r"^Following are the failed bookies: \[?(?P<bookie>[^\]]*?)\]?, and searching", "auditor"),
    P("ledger_under_replicated", SERVER, cls("AuditorTask", "Auditor"),
      rf"^Following ledgers: \[{LEDGER}(?P<more_ledgers>[^\]]*)\] of bookie: "
      r"\[?(?P<bookie>[^\]]*?)\]? "
      r"are identified as underreplicated", "auditor; ledger_id = the first ledger listed"),
    P("ledger_re_replicated", SERVER, cls("ReplicationWorker"),
      rf"^Ledger replicated successfully\. ledger id is: {LEDGER}", "BK 4.16-4.17"),
    # ---- ZooKeeper / metadata store sessions
    P("zk_session_lost", SERVER, cls("ZKSessionWatcher"),
      r"^ZooKeeper session (?:expired|reconnection timeout)",
      "3.0-4.2; 4.0.7 seen: 'reconnection timeout. Notifying session is lost.'"),
    P("zk_session_lost", SERVER, cls("ZKSessionWatcher"),
      r"^Got ZK session watch event: WatchedEvent state:(?P<state>Expired)",
      "3.0-4.2; 4.0.7 seen"),
    P("zk_session_lost", SERVER, cls("PulsarService", "ManagedLedgerFactoryImpl"),
      r"^Received (?:metadata service|MetadataStore) session event: (?P<state>SessionLost)", ""),
    P("zk_session_lost", SERVER,
      cls("ZooKeeperWatcherBase", "ZooKeeperClient", "PulsarZooKeeperClient"),
      r"^ZooKeeper (?:client connection to the ZooKeeper server has expired"
      r"|session \S+ is expired)",
      "BookKeeper's ZooKeeper client; 4.0.7 seen on bookies (both forms, the second from "
      "PulsarZooKeeperClient)"),
    P("zk_disconnected", SERVER, cls("ZKSessionWatcher", "ZooKeeperWatcherBase"),
      r"^(?:\[\d+\] )?ZooKeeper client is disconnected",
      "3.0-4.2 and BK; 4.0.7 seen (ZKSessionWatcher repeats it every tick while disconnected)"),
    P("zk_disconnected", SERVER, cls("ZKSessionWatcher"),
      r"^Got ZK session watch event: WatchedEvent state:(?P<state>Disconnected|Closed)",
      "3.0-4.2; 4.0.7 seen ('state:Closed' at shutdown, 'state:Disconnected')"),
    P("zk_disconnected", SERVER, cls("PulsarService", "ManagedLedgerFactoryImpl"),
      r"^Received (?:metadata service|MetadataStore) session event: (?P<state>ConnectionLost)",
      "4.0.7 seen (not in the reference)"),
    P("zk_session_reestablished", SERVER, cls("ZKSessionWatcher"),
      r"^ZooKeeper client reconnection with server quorum\. Current status: (?P<state>\w+)",
      "4.0.7 seen ('ConnectionLost' on brokers, 'SessionLost' on bookies)"),
    P("zk_session_reestablished", SERVER, cls("PulsarService", "ManagedLedgerFactoryImpl"),
      r"^Received (?:metadata service|MetadataStore) session event: "
      r"(?P<state>SessionReestablished|Reconnected)", "4.0.7 seen ('Reconnected')"),
    P("zk_session_reestablished", SERVER, cls("LockManagerImpl"),
      r"^Metadata store session has been re-established", "3.0-4.2; 4.0.7 seen"),
    P("zk_connected", SERVER, cls("ZooKeeperWatcherBase"), r"^ZooKeeper client is connected now",
      "BK; 4.0.7 seen"),
    # ---- process lifecycle
    P("broker_start", SERVER, cls("BrokerService"),
      r"^Started Pulsar Broker service on (?P<address>[^\s,]+)", "4.0.7 seen"),
    P("broker_shutdown", SERVER, cls("PulsarService"),
      r"^(?:Closing PulsarService|The session with metadata service was lost\. Shutting down)",
      "4.0.7 seen ('Closing PulsarService')"),
    P("bookie_start", SERVER, cls("Bookie", "BookieImpl"),
      r"^Finished reading journal, starting bookie", "4.0.7 seen"),
    P("bookie_start", SERVER, cls("Main"),
      r"^Hello, I'm your bookie, bookieId is (?P<bookie_id>\S+), listening on port (?P<port>\d+)",
      "4.0.7 seen (bin/pulsar bookie)"),
    P("bookie_start_failed", SERVER, cls("Main"), r"^Failed to build bookie server", "4.0.7 seen"),
    P("bookie_start_failed", SERVER, cls("Bookie", "BookieImpl"),
      r"^Couldn't register bookie with zookeeper, shutting down",
      "BK 4.16-4.17; 4.0.7 seen: restarted within the ZK session timeout, its old "
      "/ledgers/available znode still locked"),
    P("bookie_shutdown", SERVER, cls("Bookie", "BookieImpl"),
      r"^(?:Shutting down|Triggering shutdown of) Bookie-(?P<port>\d+) "
      r"with exitCode (?P<exit_code>-?\d+)",
      "BK 4.16-4.17; 4.0.7 seen"),
    # ---- producers, consumers, connections (broker side)
    P("producer_created", SERVER, cls("ServerCnx"),
      rf"^\[(?P<remote>[^\]]+)\] Created new producer: Producer\{{topic=\w+\{{topic={TOPIC}\}}.*?"
      r"producerName=(?P<producer>[^,]+), producerId=(?P<producer_id>\d+)",
      "4.0+ appends ', role: {}'; 4.0.7 seen"),
    P("producer_closed", SERVER, cls("ServerCnx"),
      rf"^\[\w+\{{topic={TOPIC}\}}\]\[(?P<producer>[^\]]+)\] Closed producer on cnx "
      r"(?P<remote>\S+)\. "
      r"producerId=(?P<producer_id>\d+)", "3.0-4.2; 4.0.7 seen"),
    P("producer_disconnected", SERVER, cls("Producer"),
      rf"^Disconnecting producer: Producer\{{topic=\w+\{{topic={TOPIC}\}}.*?"
      r"producerName=(?P<producer>[^,]+), producerId=(?P<producer_id>\d+)",
      "4.0+ appends ', assignedBrokerLookupData: …'; 4.0.7 seen"),
    P("consumer_created", SERVER, cls("ServerCnx"),
      rf"^\[(?P<remote>[^\]]+)\] Created subscription on topic {TOPIC} / (?P<subscription>\S+)",
      "3.0-4.2; 4.0.7 seen"),
    P("consumer_closed", SERVER, cls("ServerCnx"),
      r"^\[(?P<remote>[^\]]+)\] Closed consumer, consumerId=(?P<consumer_id>\d+)",
      "3.0-4.2; 4.0.7 seen (no topic in the text)"),
    P("consumer_disconnected", SERVER, cls("Consumer"),
      rf"^Disconnecting consumer: Consumer\{{subscription=\w+\{{topic={TOPIC}, "
      r"name=(?P<subscription>[^}]+)\}, consumerId=(?P<consumer_id>\d+)", "4.0.7 seen"),
    P("connection_closed", SERVER, cls("ServerCnx"), r"^Closed connection from (?P<remote>\S+)",
      "3.0-4.2; 4.0.7 seen"),
    P("dedup_replay", SERVER, cls("MessageDeduplication"),
      rf"^\[{TOPIC}\] Replaying (?P<entries>\d+) entries for deduplication", "3.0-4.2; 4.0.7 seen"),
    P("dedup_enabled", SERVER, cls("MessageDeduplication"), rf"^\[{TOPIC}\] Enabled deduplication",
      "3.0-4.2; 4.0.7 seen"),
    # ---- clients per version (C++ 2.x-4.x, Java 2.10-4.2, Go): specific forms first
    *CLIENT_VERSION_PATTERNS,
    # ---- C++ / Python client
    P("client_reconnect_scheduled", CLIENT, cls("HandlerBase"),
      rf"^\[{TOPIC}, (?P<client_name>[^\]]*)\] Schedule reconnection in (?P<delay_s>[\d.]+) s",
      "C++ 3.1-4.2; 4.2.0 seen"),
    P("client_producer_created", CLIENT, cls("ProducerImpl"),
      rf"^\[{TOPIC}, (?P<producer>[^\]]*)\] Created producer on broker (?P<connection>\[[^\]]*\])",
      "C++ 3.1-4.2; 4.2.0 seen (empty name on first creation)"),
    P("client_producer_closed", CLIENT, cls("ProducerImpl"),
      rf"^\[{TOPIC}, (?P<producer>[^\]]*)\] Closed producer (?P<producer_id>\d+)", "4.2.0 seen"),
    P("client_producer_disconnected", CLIENT, cls("ProducerImpl"),
      r"^Broker notification of Closed producer: (?P<producer_id>\d+)",
      "C++ 3.5+ (no topic in the text); 4.2.0 seen"),
    P("client_invalid_producer_receipt", CLIENT, cls("ClientConnection"),
      r"^\[(?P<connection>[^\]]*)\] Got invalid producer Id in SendReceipt: (?P<producer_id>\d+) "
      r"-- msg: (?P<seq>\d+)", "4.2.0 seen after an unload: receipts for the closed producer"),
    P("client_consumer_created", CLIENT, cls("ConsumerImpl"),
      rf"^\[{TOPIC}, (?P<subscription>[^,\]]*), (?P<consumer_id>\d+)\] Created consumer on broker"
      r" (?P<connection>\[[^\]]*\])",
      "4.2.0 seen"),
    P("client_consumer_closed", CLIENT, cls("ConsumerImpl"),
      rf"^\[{TOPIC}, (?P<subscription>[^,\]]*), (?P<consumer_id>\d+)\] Closed consumer",
      "4.2.0 seen"),
    P("client_connection_closed", CLIENT, cls("ClientConnection"),
      r"^\[(?P<connection>[^\]]*)\] Connection (?:disconnected|closed with (?P<result>\w+))",
      "C++ 3.5+; 4.2.0 seen ('Connection disconnected (refCnt: 4)')"),
    P("client_send_error", CLIENT, cls("ClientConnection"),
      r"^\[(?P<connection>[^\]]*)\] ?Received send error from server: (?P<reason>.*)", "C++"),
    # ---- Java client (applications, and the broker's own client)
    P("client_reconnect_scheduled", JAVA_CLIENT, cls("ConnectionHandler"),
      rf"^\[{TOPIC}\] \[(?P<client_name>[^\]]*)\] "
      r"(?:Closed connection .*?|Could not get connection to broker: .*?) "
      r"-- Will try again in (?P<delay_s>[\d.]+) s",
      "Java 3.0-4.2; 4.0.7 seen (both forms, the broker's system-topic reader)"),
    P("client_producer_created", JAVA_CLIENT, cls("ProducerImpl"),
      rf"^\[{TOPIC}\] \[(?P<producer>[^\]]*)\] Created producer on cnx", "Java 3.0-4.2"),
    # ---- broker and bookie forms of other versions (2.10-3.3)
    *SERVER_VERSION_PATTERNS,
]
# fmt: on
