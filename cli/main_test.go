package cli

import (
	"os"
	"testing"
)

// The tests run from the repository root, so that paths read as in README's
// commands (testdata/tiny/…).
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
