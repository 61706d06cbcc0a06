package mimi

// The tests run the codec on the CPU backend (it registers itself as the
// default).
import _ "github.com/pp-offline/pp-offline/infer/backend/cpu"
