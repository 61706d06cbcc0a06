//go:build tools

// This file pins modules that packages of this repository are about to use, so
// that `go mod tidy` keeps them while the packages are written in parallel.
package main

import (
	_ "github.com/go-audio/wav"
	_ "github.com/nlpodyssey/gopickle/pickle"
	_ "github.com/nlpodyssey/safetensors"
	_ "github.com/schollz/progressbar/v3"
	_ "golang.org/x/sys/cpu"
	_ "golang.org/x/sys/unix"
)
