// Package archtest holds the tests that keep docs/architecture.md and the
// code in step.
//
// What a passing run guarantees:
//   - every requirement id (R-PUB-4, or a section's R-PUB) and every SPEC
//     section (§3) cited in a Go comment anywhere in the module, or in a page
//     under docs/ or the README, is defined in docs/architecture.md's
//     Requirements: an id as a bold list item with its sentence, a section
//     as a heading that names its ids; no id is defined twice.
//
// The package has no non-test code.
package archtest
