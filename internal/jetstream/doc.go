// Package jetstream runs eval rollouts across machines on NATS JetStream
// (SPEC R-DIST-2): the only package that imports NATS. One code path serves
// an external server or cluster (a URL) and an in-process server
// (Embedded) for one host and for tests.
//
// What it creates, idempotently (create-or-update, so every eval and
// worker may call Setup), with replicas min(3, servers the connection
// knows of):
//
//	APODEX_ROLLOUTS  stream, subjects apodex.rollout.<eval>, work-queue
//	                 retention, file storage, duplicate window 1h. One
//	                 message per rollout (an eval.Job), message id
//	                 "<eval>/<world>/<config>/<rollout>": re-publishing a
//	                 rollout within the window is dropped by the server.
//	workers          durable pull consumer on APODEX_ROLLOUTS, explicit
//	                 acks, ack wait = lease TTL, unlimited deliveries.
//	APODEX_RESULTS   stream, subjects apodex.result.<eval>.<rollout hash>,
//	                 limits retention, file storage. At most one message
//	                 per subject: a result is published only if its subject
//	                 is empty (expected last subject sequence 0).
//	apodex-leases    KV bucket, history 1, TTL = lease TTL; key
//	                 <eval>.<rollout hash>.
//	apodex-workers   KV bucket, history 1, TTL 1m; key = worker name; a
//	                 heartbeat every 5s (host, rollouts running and done).
//	apodex-worlds    object store; object name = world id; a tar of the
//	                 stored world directory.
//	apodex-records   object store; object name = run id; a gzipped tar of
//	                 the run directory (record, blobs, planes).
//
// Guarantees:
//   - a rollout message is delivered to one worker at a time and stays
//     queued until a worker acks it, which it does only after the result
//     is stored in APODEX_RESULTS (at-least-once delivery, no order);
//   - a worker holds a rollout by a lease entry it creates, and renews
//     (compare-and-set on the revision) every TTL/3 together with an
//     in-progress ack; the revision is the fencing token. Before it
//     publishes a result, a worker sets the entry to done with its
//     current revision: if the lease expired or another worker took it,
//     the set fails and the result is dropped (ErrFenced);
//   - a rollout has at most one result message (the per-subject
//     expectation), so a redelivered rollout, or a worker that lost its
//     lease between its commit and its publish, cannot score it twice;
//   - a worker that dies stops renewing: after the ack wait the rollout
//     is redelivered, and its expired lease lets another worker take it;
//     the dead worker's partial run stays in its home, never counted;
//   - a worker stopped gracefully (SIGTERM) stops pulling, naks what it
//     holds and releases those leases: another worker gets them at once;
//   - a worker locks <home>/workers/<name>.lock and lists the runs it
//     starts in <name>.started; at start it removes the overlays of the
//     runs of every worker of the home whose lock is free (a crash);
//   - results are read back in stream order by Collect, which fetches
//     each result's record into the eval's home and appends the line; a
//     slow rollout never holds back finished ones.
package jetstream
