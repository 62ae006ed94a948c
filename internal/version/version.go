// Package version is the runtime's version: run_started records it, apodex
// --version prints it, and the exports and telemetry that name the
// producer carry it. It is a leaf, so that packages reading finished runs
// need not import the package that executes them.
package version

// Runtime is the apodex version, recorded in every run.
const Runtime = "0.1.0"
