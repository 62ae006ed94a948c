// Package scripted is a deterministic, stateless llm.Model for tests and the
// product's demo (--provider scripted --script FILE).
//
// Guarantees:
//   - Deterministic: the same request always yields the same response, tool
//     call ids and usage. Nothing reads a clock, randomness or the network.
//   - Stateless: the turn number is the count of assistant messages already
//     in the request, not a counter kept by the Model, so a resumed or
//     replayed run gets the same answer for the same history, and one Model
//     may serve concurrent runs.
//
// A Model plays either a Go Policy (New) or a JSON script (Load, Parse):
//
//	{"turns": [
//	  {"say": "text", "calls": [{"name": "list_files", "args": {"path": "/inputs"}}]},
//	  {"when": [
//	    {"match": "sum=([0-9.]+)", "calls": [{"name": "write_file", "args": {"content": "${1}\n"}}]},
//	    {"calls": [{"name": "finish", "args": {"summary": "could not compute"}}]}
//	  ]}
//	]}
//
// Turn i (from 0) answers a request holding i assistant messages. A turn is
// direct (say and/or calls) or a "when" list of alternatives: the first whose
// "match" (a Go regexp) matches LastObservation, or that has no "match", is
// played; if none does, Generate fails. In "say" and in every string value
// inside "args", at any depth, ${N} becomes capture group N of the match and
// ${last} the whole last observation; anything else, such as ${N} for a group
// that does not exist or shell text like ${HOME}, stays as written. "raw_args"
// replaces "args" with text played verbatim, to send malformed JSON on
// purpose. A request past the last turn fails with ErrEnded.
package scripted
