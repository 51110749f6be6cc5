package tools

import "time"

// SweepIdle forgets the people idle for Options.EvictIdle as of now, as the
// registry's own sweep does every little while, and returns how many.
func SweepIdle(s *Server, now time.Time) int { return s.people.sweep(now) }

// HTTPHandlers is how many MCP HTTP handlers the Server keeps for
// ShutdownHTTP: the default user's and one per person in the registry.
func HTTPHandlers(s *Server) int {
	s.http.mu.Lock()
	defer s.http.mu.Unlock()
	return len(s.http.list)
}
