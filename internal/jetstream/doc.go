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
//	                 is empty (expected last subject sequence 0). Also
//	                 apodex.abandoned.<eval>.<rollout hash>: one message
//	                 (an Abandoned, id "abandoned/<run id>") per run that
//	                 will never count.
//	apodex-leases    KV bucket, history 1, TTL = lease TTL; key
//	                 <eval>.<rollout hash>.
//	apodex-workers   KV bucket, history 1, TTL 1m; key = worker name; a
//	                 heartbeat every 5s (host, rollouts running and done).
//	apodex-evals     KV bucket, history 1; key = eval id, value = its plan,
//	                 so any host can follow the eval.
//	apodex-worlds    object store; object name = world id; a tar of the
//	                 stored world directory.
//	apodex-records   object store; object name = run id; a gzipped tar of
//	                 the run directory (record, blobs, planes). Object
//	                 stores are created if missing and otherwise keep their
//	                 settings (an operator's max bytes).
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
//   - a run that will never count (lease lost, handed back, scored by
//     another, result not publishable, or left by a worker that died and
//     found by the next worker on its home) is abandoned: marked in the
//     worker's home, its record shipped, an Abandoned published;
//   - results are read back in stream order by Collect, which fetches
//     each result's record into the eval's home and appends the line
//     (abandoned runs go to abandoned.jsonl, never counted); a slow
//     rollout never holds back finished ones. One process of a home
//     collects an eval at a time (CollectEval's flock);
//   - a record the record store cannot take (full) makes the result a
//     failure saying so, and the rollout is acked: never a retry loop;
//   - every API request is bounded (apiTimeout): a request whose reply is
//     lost while the cluster elects a leader is retried, not waited on. A
//     lease commit or result tried again after a lost reply, and refused
//     because the lost try landed, counts as landed when the entry or the
//     subject holds exactly what was sent (the run is counted, never also
//     called abandoned);
//   - a reading of the results never waits on one consumer name: the R1
//     consumer of a reading may be placed on a node just killed (a cluster
//     counts it online for minutes), so a reading whose consumer cannot be
//     recreated at once starts anew on another, from the message after
//     the last one taken.
package jetstream
