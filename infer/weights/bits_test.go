package weights

import "math"

func mathBits(f float32) uint32 { return math.Float32bits(f) }
