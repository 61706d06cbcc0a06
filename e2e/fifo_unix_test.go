//go:build unix

package e2e

import "syscall"

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }
