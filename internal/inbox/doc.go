// Package inbox is the run-scoped user message queue (SPEC §9, R-MSG): other
// processes (apodex say, the HTTP API) send messages and control commands to a
// run, and the run delivers them into the model-visible history.
//
// # Transport
//
// Two append-only JSON Lines files in the run directory, guarded by one lock:
//
//   - inbox.jsonl, written by senders, one command per line:
//     {"op":"say","id":"M1","text":…,"class":…,"time":…,"sender":…}
//     {"op":"update","id":"M3","text":…,"class":…,"time":…}
//     {"op":"withdraw","id":"M3","time":…}
//     {"op":"control","id":"C1","kind":"pause|resume|cancel|budget","args":{…},"time":…}
//   - inbox-state.jsonl, written by the run only:
//     {"op":"delivered","id":"M3","seq":57,"time":…}  (seq: the event in events.jsonl)
//     {"op":"applied","id":"C1","seq":58,"time":…}
//   - inbox.lock, locked exclusively (flock) around every append to either
//     file and around every read-decide-append of a sender.
//
// Message ids are M1, M2, … in file order: a say's id is 1 + the number of
// valid say lines before it, assigned under the lock, so Send can return it
// and ids are unique and gapless across any number of concurrent senders.
// Control ids C1, C2, … are assigned the same way. The "id" written in a say
// or control line is informational; readers number by position.
//
// Every append is one write(2) of whole lines followed by fsync, so a killed
// writer leaves at most one torn last line. Readers ignore an incomplete last
// line until it is completed; the next writer, holding the lock, terminates a
// torn tail with a newline first, so a crashed writer never swallows the next
// command. A complete line that does not parse is skipped (and counted), never
// fatal: the inbox is outside input.
//
// # Guarantees
//
//   - Ordering: messages are delivered in id order (= the order senders got
//     the lock). Control commands are returned in id order.
//   - Update and withdraw act only on a message not yet delivered. A sender
//     decides under the lock after reading both files, so the answer is exact:
//     once the run has recorded a delivery, update and withdraw fail with
//     *TooLateError naming the event seq and time of delivery.
//   - Delivery is at most once into the model-visible history and is
//     acknowledged only when the run records it: Deliver holds the lock,
//     hands each pending message (latest text) to the caller, which appends
//     the message event to the record and returns its seq, and only then
//     writes the delivered mark. A withdrawn message is never handed out; an
//     updated one only in its latest text; no update or withdraw can slip in
//     between.
//   - Durability: a message sent while the run is down waits in inbox.jsonl
//     and is delivered after Open on resume. If the run dies between recording
//     the message event and writing the mark, the record holds the message and
//     the inbox does not: on resume the run must call MarkDelivered for every
//     message event found in the record before delivering again (idempotent).
//   - Controls are returned by Controls at most once per Inbox value and
//     survive restarts until the run calls MarkApplied; a run that applies
//     controls must mark them, or it sees them again after a restart.
//
// Pending followed by MarkDelivered is the unlocked variant of Deliver: a
// sender may update or withdraw the message between the two calls. Use it to
// peek and to reconcile after a crash; deliver with Deliver.
//
// # Waking
//
// Wait and Notify poll the size of inbox.jsonl every 50 ms (inotify would
// save a few milliseconds at the cost of a Linux-only dependency on
// golang.org/x/sys); they report a change relative to the last read by
// Pending, Deliver or Controls, so nothing sent after that read is missed.
//
// # Classification
//
// Classify is a deterministic keyword classifier into the R-MSG-4 taxonomy,
// recorded with each message at send time. It is a baseline: an LLM classifier
// can replace it by writing its own class into the say and update lines (any
// valid Class in the line wins over Classify). ChangesContract says whether a
// message likely changes the objective, a deliverable or an acceptance clause
// (R-CONTRACT-3), and ParseBudget and AsControl turn budget and pause, resume
// or cancel wording into control commands.
package inbox
