//go:build (!amd64 && !arm64) || purego

package ops

func archDotRows(id kernelID, dst, q, mat []float32, stride int, rows []int32, nl int) bool {
	return false
}

func archAxpyRows(id kernelID, dst, w, mat []float32, stride int, rows []int32) (int, bool) {
	return 0, false
}
