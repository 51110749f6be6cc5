package tools

import "time"

// SweepIdle forgets the people idle for Options.EvictIdle as of now, as the
// registry's own sweep does every little while, and returns how many.
func SweepIdle(s *Server, now time.Time) int { return s.people.sweep(now) }
