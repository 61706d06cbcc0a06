//go:build nocuda

package cu

import "fmt"

// load in a build without the CUDA binding (-tags nocuda: a static binary
// that needs no dynamic loader).
func load() error {
	return fmt.Errorf("%w: this build has no CUDA support (built with -tags nocuda)", ErrNoDriver)
}
