package eval

import "time"

// waitALittle yields between polls of a condition (never part of a verdict).
func waitALittle() { time.Sleep(5 * time.Millisecond) }
