// Package treecmd is the commands that work on a finished run's final
// tree: diff and apply (a --repo run's change, as a patch or written back
// into its tree) and workspace (how a run's /workspace is kept, and the
// whole tree written out: a world rollout keeps only its changes over the
// stored world, read through package runfiles).
//
// Guarantees: apply writes all or nothing and refuses a file changed in
// the target since the run started; workspace --to writes only into a
// new or empty directory; none of them acts on a live run's tree.
package treecmd
