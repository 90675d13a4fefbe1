package accessdb

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/query/querytest"
)

// TestApprovalQueueReadsPendingOnly: the queue of pending approval requests
// reads approval_requests_pending, which holds only pending rows, however
// many decided requests are kept beside them.
func TestApprovalQueueReadsPendingOnly(t *testing.T) {
	plan := querytest.ExplainSeeded(t, func(tx pgx.Tx) {
		fixture.AddApprovalRequests(t, tx, 20000, func(int) fixture.ApprovalRequest {
			return fixture.ApprovalRequest{Channel: "refund", Reason: "r", State: "approved", Decider: "bob", Outcome: "done"}
		})
		fixture.AddApprovalRequests(t, tx, 3, func(int) fixture.ApprovalRequest {
			return fixture.ApprovalRequest{Channel: "refund", Reason: "r"}
		})
	}, []string{
		`ANALYZE effectd.approval_requests`,
	}, approvalPending, []string{"refund"}, 0, 101)
	if !strings.Contains(plan, "approval_requests_pending") || strings.Contains(plan, "Seq Scan") {
		t.Fatalf("the pending queue does not read approval_requests_pending alone:\n%s", plan)
	}
}
