// Package runview holds the read models of a run directory: Info (show),
// Row (runs), Progress (status, and the runtime's answer to a progress
// query), agent activity and assignments, liveness and trainability.
// Render prints an Info as the text of `apodex show`; BoardWatcher reads
// the board and follows a live run's record without re-reading the file.
//
// Guarantees:
//   - every model is what the record says: Info and Progress come from the
//     one projection (runstate) read from its checkpoint plus the events
//     after it (runstate.LoadFrom), Row from the run's summary.json while
//     that still covers the record (same size, same line at its boundary),
//     else from the projection;
//   - the summary and the checkpoint are caches: a reader that finds one
//     missing or stale rebuilds it from the record, only for a run that is
//     not live (a live run's own Keeper keeps them) and never failing for
//     a directory it may not write; deleting them loses nothing;
//   - reading never disturbs a live run: it takes no lock the run takes
//     and writes nothing in a live run's directory;
//   - Trainability reads and checks the whole record (export gates on it);
//     the Info of show trusts, for the part of the record before its
//     checkpoint, the integrity the checkpoint's writer found.
package runview
