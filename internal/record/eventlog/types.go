package eventlog

// TypeRunFinished is the type of a run's last event (record.TypeRunFinished):
// Follow ends after it.
const TypeRunFinished = "run_finished"
