package tools_test

// hostileNameCases are the hostile-Company cases of this group (see TestHostileCompany).
func hostileNameCases() []hostileCase {
	return nil
}
