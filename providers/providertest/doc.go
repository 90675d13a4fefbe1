// Package providertest is the contract suite every effectd provider must pass
// against the sandbox: success makes exactly one effect, a repeated key makes
// no second one (keyed providers), injected 5xx and 429 errors are retryable
// and not sent, a permanent error is not retryable, a dropped answer is
// maybe-sent with the effect applied once, a hang is cut by the caller's
// deadline, and Lookup (when the provider has one) tells found from absent.
//
// Errors are classified by behaviour with effect.Classify, the function the
// dispatcher uses: through Retryable() bool, MaybeSent() bool and
// RetryAfter() time.Duration found with errors.As. Effects carry the meta keys
// effect.MetaEventID and effect.MetaIntentID, as the dispatcher passes them.
//
// To add a provider, call Run from its tests with a Harness:
//
//	func TestContract(t *testing.T) {
//		providertest.Run(t, providertest.Harness{
//			Kind:  "stripe",             // ledger and fault kind of its sandbox emulator
//			Keyed: true,                 // deduplicated by the idempotency key
//			New: func(t *testing.T, baseURL string) providertest.Provider {
//				p, err := stripe.New(stripe.Config{BaseURL: baseURL, APIKey: "sk_test_x"})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return p
//			},
//			Payload: func(i int) json.RawMessage { return json.RawMessage(`{"payment_intent":"pi_1","amount":100}`) },
//		})
//	}
//
// Every case runs in parallel on its own sandbox (sandbox.New(Harness.Sandbox)).
// A provider whose emulator answers a permanent error differently sets
// PermanentFault; a case it cannot meet is listed in Skip with the reason; cases
// of its own (say an ambiguous lookup) go in Cases and get the same Env.
package providertest
