package tools_test

// hostileConversationCases are the hostile-Company cases of this group (see TestHostileCompany).
func hostileConversationCases() []hostileCase {
	return nil
}
