// Package archtest holds the tests that keep the module's architecture and
// docs/architecture.md in step.
//
// What a passing run guarantees:
//   - every package of the module is in exactly one layer, and imports only
//     packages of the layers its layer may import (TestLayers, the table in
//     layers_test.go, the graph from go list; test files are not counted);
//     an outside module is imported only by the packages named for it;
//   - docs/architecture.md shows that same table (TestDocLayers; -update
//     rewrites it);
//   - every requirement id (R-PUB-4, or a section's R-PUB) and every SPEC
//     section (§3) cited in a Go comment anywhere in the module, or in a page
//     under docs/ or the README, is defined in docs/architecture.md's
//     Requirements: an id as a bold list item with its sentence, a section
//     as a heading that names its ids; no id is defined twice.
//
// The package has no non-test code.
package archtest
