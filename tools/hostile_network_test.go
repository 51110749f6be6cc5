package tools_test

// hostileNetworkCases are the hostile-Company cases of this group (see TestHostileCompany).
func hostileNetworkCases() []hostileCase {
	return nil
}
