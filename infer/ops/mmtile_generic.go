//go:build !amd64 || purego

package ops

// No column-blocked tiles on this platform: mmRange runs its portable path.
func (m Mat) archMMTiles(k *kernelSet, r0, r1 int, dst, xs [][]float32, in *mmtInputs) bool {
	return false
}

// mmtInputs has no use without the tiles.
type mmtInputs struct{}

func (m Mat) mmtPrepare(k *kernelSet, xs [][]float32) *mmtInputs { return nil }

func mmtRelease(in *mmtInputs) {}
