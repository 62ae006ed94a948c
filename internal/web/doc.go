// Package web is apodex serve: the JSON API over a home's runs and the page
// that shows them live. It is the only package that serves HTTP.
//
// Guarantees:
//   - every answer under /api is JSON; every refusal is a 4xx with
//     {"error": "..."} saying what to do, and no handler panic reaches the
//     client (a recovered panic is a 500 with a JSON error);
//   - without a token the server answers only requests whose Host is a
//     loopback name (no DNS rebinding); with a token every /api request needs
//     "Authorization: Bearer TOKEN" or the cookie the page gets from
//     /?token=TOKEN, compared in constant time;
//   - with a ControlKey (and no token), every POST under /api (messages,
//     controls) needs it, as a bearer token or the page's cookie: a process
//     that can reach loopback but never saw the URL apodex serve printed
//     (a sandboxed command under --network host) reads, but cannot steer;
//   - a POST is refused when its Origin (or Sec-Fetch-Site) says it comes
//     from another site, when it is not application/json, and when its body
//     is over MaxBody bytes;
//   - files are read only under the run's planes (inputs, workspace,
//     outputs), and no symbolic link on the way is followed, not even one
//     that stays in the run directory (403 "... is a symbolic link; not
//     followed"); they are served as text with nosniff and a sandboxing CSP;
//   - the stream is one SSE event per record event, "id: <seq>", in seq order
//     without gaps, from the record's subscriber (record.Follow); a client that
//     reconnects with Last-Event-ID gets exactly the events after it;
//   - messages and controls go through internal/inbox, the same queue as
//     apodex say / pause / resume / cancel.
//
// Run state is read through data.go and claims.go only, from one live
// state per open run (live.go: the record is folded once, then only what is
// appended is read); no view re-reads the record.
package web
