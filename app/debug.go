package app

// This file is the metrics listener's memory debugging, for benchmarks
// (BENCHMARKS.md "Hosted: people waiting"): with POPPY_DEBUG_MEMORY=1 in
// serve's environment, the --metrics-addr listener (never the public one)
// also serves Go's profiles at /debug/pprof/ and, at POST /debug/gc, runs a
// garbage collection and answers the live heap, the goroutine stacks and
// the number of goroutines that remain. It is off by default: a profile
// shows what is in memory, and a forced collection costs a pause.

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/metrics"
)

// DebugMemoryEnv turns the memory debugging on when set to 1.
const DebugMemoryEnv = "POPPY_DEBUG_MEMORY"

// DebugGCPath is where a POST runs a collection and reports memory.
const DebugGCPath = "/debug/gc"

// MemoryAfterGC is what DebugGCPath answers, in bytes.
type MemoryAfterGC struct {
	HeapLive   uint64 `json:"heap_live_bytes"`     // the heap's live objects after the collection
	Stacks     uint64 `json:"stack_bytes"`         // the goroutines' stacks in use
	Goroutines uint64 `json:"goroutines"`          // goroutines now
	HeapInuse  uint64 `json:"heap_inuse_bytes"`    // the heap's spans in use (live objects and their slack)
	Released   uint64 `json:"heap_released_bytes"` // the heap's pages given back to the system
}

// debugMemory adds the profiles and DebugGCPath to mux, and samples the
// heap profile finely (every 4 KiB allocated rather than 512 KiB): it
// runs before anything else starts.
func debugMemory(mux *http.ServeMux) {
	runtime.MemProfileRate = 4096
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("POST "+DebugGCPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(memoryAfterGC())
	})
}

// memoryAfterGC collects garbage twice (the first may leave finalized
// objects for the second) and reads the runtime's memory metrics.
func memoryAfterGC() MemoryAfterGC {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return MemoryAfterGC{HeapLive: s[0].Value.Uint64(), Stacks: s[1].Value.Uint64(), Goroutines: s[2].Value.Uint64(),
		HeapInuse: s[3].Value.Uint64(), Released: s[4].Value.Uint64()}
}
