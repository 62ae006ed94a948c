// Package crashtest holds the crash tests of R-REC-4: runs started as real
// apodex child processes are killed with SIGKILL at random points, resumed
// with `apodex resume` (which may itself be killed), and checked against an
// uncrashed run of the same scripted policy.
//
// What a passing run of these tests guarantees, for every kill point tried:
//   - the run completes (the last process exits 0, run_finished says
//     completed);
//   - /outputs and /workspace hold exactly the files, with the same bytes,
//     of the uncrashed run, and (team runs) the board and the assignments
//     end in the same states;
//   - the record's seq runs 1, 2, 3, … with no gap or duplicate, and the
//     complete lines the killed process had written are a prefix of the
//     final record: nothing recorded before the kill is lost or rewritten;
//   - each resume is recorded by one resumed event that names the seq it
//     continued after and whether a torn last line was repaired;
//   - a user message, sent while the run is live or while it lies killed,
//     is delivered at most once: at most one message event per id, and at
//     most one copy in any agent's rebuilt history;
//   - no sandboxed process outlives the process that started it;
//   - the run is self-contained: a run whose task file is deleted after it
//     started completes, resumes after a kill and verifies; a contract
//     revised by a user message, killed right after the revised contract
//     event, resumes with the revision (once); a control sent inside a
//     message ("pause"), killed right after it was recorded, still holds
//     in the resumed run (TestTaskDeletedAfterStart,
//     TestRevisionSurvivesKill, TestMessageControlSurvivesKill).
//
// Kill points are chosen by freezing the child (SIGSTOP to each of its
// threads), reading how many events its record holds, and letting it run
// on (SIGCONT) for a few microseconds at a time until the drawn point is
// reached; the process is then killed while frozen, which is the same as
// killing it at that instant. Most points are a number of events drawn
// over the uncrashed run's length; others wait for a moment a count rarely
// hits (a model call in flight, a slow bash command running, the lease just
// granted, a merged worktree not yet reported, a lead coordination call
// whose effect is recorded and whose result is not, finalization, an atomic
// file write in flight). TestCrashAt aims once at each such moment. A kill
// cannot tear a line of the record (each event is one write), so a torn
// last line, as power loss leaves, is simulated for some points by
// appending a fragment after the kill.
//
// Settings (environment): APODEX_CRASH_POINTS, kill points per random test
// (default 12); APODEX_CRASH_SEED, the base seed (default 1); each case's
// seed is in its subtest name, and -run with that name replays it (the kill
// lands at the same aim, at the same event count give or take the
// scheduler); APODEX_CRASH_SLICE_US, how long the child runs between two
// looks (default 2); APODEX_CRASH_KEEP=1 keeps the runs' directories.
//
// The package has no non-test code.
package crashtest
