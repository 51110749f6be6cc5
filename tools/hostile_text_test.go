package tools_test

// hostileTextCases are the hostile-Company cases of this group (see TestHostileCompany).
func hostileTextCases() []hostileCase {
	return nil
}
