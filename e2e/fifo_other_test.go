//go:build !unix

package e2e

import "errors"

func mkfifo(string) error { return errors.New("named pipes in the file system are Unix only") }
