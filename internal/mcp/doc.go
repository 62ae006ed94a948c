// Package mcp is Apodex's adapter to the Model Context Protocol, the one
// package that imports the official Go SDK: it offers the tools of outside
// MCP servers inside a run (client side), and Apodex's own runs as tools to
// other agents (server side, serve.go).
//
// Client guarantees:
//   - each configured server is started (stdio) or reached (streamable
//     HTTP) within its startup timeout; one that does not start, or lists
//     no valid tools, is recorded (mcp_server, state failed) and the run
//     goes on without it;
//   - a stdio server runs in the run's sandbox, as any command does (same
//     backend, uid and limits), seeing the system directories, the
//     directory of its command at /mcp/command, its cwd at /mcp/cwd and
//     the planes its entry names, all read-only, and no network unless its
//     entry says network = true (outbound only, never the host's
//     loopback); only the directories its entry names writable
//     (/workspace or below, none a symbolic link) are mounted writable,
//     and the files a call changed there are the call's deltas (a replay
//     makes them again from the record); sandbox = false runs it on the
//     host, recorded as sandbox "none";
//   - each tool is offered as mcp__NAME__TOOL (names the providers
//     accept, never a built-in's) with the server's description and input
//     schema; a tool whose schema is not a valid JSON Schema of an object
//     is left out, with a warning and the reason in the record;
//   - a call never fails the run: arguments not matching the schema, a
//     server that did not start, exited, timed out, answered invalid
//     JSON-RPC or a JSON-RPC error, and a result with isError all come back
//     as an error observation naming the server and what happened, and
//     the record's meta.mcp names the server, the tool, the server's
//     reported name and version and the failure;
//   - a result is rendered as text (text as is, structured content as
//     JSON, images, audio and resources described with their size), cut
//     to the observation limit with the cut stated and kept whole in the
//     record (up to MaxResult); its text gets an evidence id;
//   - after a server says its tools changed, the list is fetched again
//     before the next model call (tool.Family) and recorded;
//   - no secret (an env value, a header value, a token) is written to the
//     record: command, args and url are recorded as configured, before
//     ${VAR} expansion, and of env and headers only the names;
//   - a replay (Recorded) offers the recorded tools and serves the
//     recorded results without starting or contacting any server.
package mcp
