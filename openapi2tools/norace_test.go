//go:build !race

package openapi2tools

// raceDetector is true when the tests run under the race detector, which
// makes translating a document several times slower.
const raceDetector = false
