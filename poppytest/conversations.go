package poppytest

// convState holds every conversation (Poppy 0.1 §7).
type convState struct{}

// installConversations sets up the shop and the conversation API.
func (s *Server) installConversations() {
	s.shop = newShop(s.timeNow())
	s.conv = &convState{}
}
