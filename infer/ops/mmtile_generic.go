//go:build !amd64 || purego

package ops

// No column-blocked tiles on this platform: mmRange runs its portable path.
func (m Mat) archMMTiles(k *kernelSet, r0, r1 int, dst, xs [][]float32) bool { return false }
