//go:build !unix

package batchjob

import "errors"

func mkfifo(string) error { return errors.New("named pipes in the file system are Unix only") }
