// Package runview holds the read models of a run directory: Info (show,
// runs), Progress (status, and the runtime's answer to a progress query),
// agent activity and assignments, liveness and trainability. Each is read
// from the record through the one projection (runstate) and, for liveness,
// the run's lock file; reading never disturbs a live run and never writes.
// Render prints an Info as the text of `apodex show`; BoardWatcher reads
// the board and follows a live run's record without re-reading the file.
package runview
