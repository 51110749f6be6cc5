package auth

// Kind is a sign-in type (Poppy 0.1 §4.4): device, direct or mediated.
type Kind string

// The sign-in kinds.
const (
	KindDevice   Kind = "device"   // Device Sign-In, §4.6
	KindDirect   Kind = "direct"   // Direct Sign-In, §4.5
	KindMediated Kind = "mediated" // Mediated Sign-In, §4.7
)
