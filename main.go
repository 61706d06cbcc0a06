// Command pp-offline runs NVIDIA PersonaPlex offline: user WAV in, agent WAV
// and transcript out. The command line is package cli; see README.md and
// docs/ARCHITECTURE.md.
package main

import (
	"os"

	"github.com/pp-offline/pp-offline/cli"
)

// version and commit can be set with -ldflags "-X main.version=… -X
// main.commit=…".
var (
	version = "0.1.0-dev"
	commit  = ""
)

func main() { os.Exit(cli.Main(os.Args, version, commit)) }
