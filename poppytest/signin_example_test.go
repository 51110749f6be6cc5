package poppytest_test

import (
	"fmt"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// The fixed test accounts: Mediated Sign-In takes an account's Email and
// Password as the credentials "email" and "password"; printing an Account
// leaves its password out.
func ExampleDefaultAccounts() {
	for _, a := range poppytest.DefaultAccounts() {
		fmt.Println(a)
	}
	// Output:
	// poppytest.Account{ID: "acct_dana", Email: "dana@example.com", Password: [redacted], RequiresCode: false}
	// poppytest.Account{ID: "acct_sam", Email: "sam@example.com", Password: [redacted], RequiresCode: true}
}

// A demo Company that approves every Device Sign-In for acct_dana two
// seconds after it starts, so no person is needed, and asks the agent to
// poll every second.
func ExampleAutoApproval() {
	t := &poppytest.Reporter{}
	defer t.Close()
	s := poppytest.NewServer(t, &poppytest.Options{
		AutoApprove:    &poppytest.AutoApproval{Account: "acct_dana", After: 2 * time.Second},
		DeviceInterval: time.Second,
	})
	fmt.Println(s.Issuer())
	// Output: https://auth.example.com
}
