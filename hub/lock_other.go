//go:build !unix && !windows

package hub

import "context"

// lockFile is a no-op where flock does not exist.
func lockFile(context.Context, string, func()) (func(), error) { return func() {}, nil }
