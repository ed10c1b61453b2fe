// Package awstest runs AWS without AWS for tests: it starts moto_server (a local AWS emulator,
// `pip install 'moto[server]==5.2.1'`) on a free loopback port, puts a thin front in front of it
// that fills moto's gaps, hands out an aws.Config pointed at that front, and seeds a realistic
// account on demand.
//
//	func TestX(t *testing.T) {
//		m := awstest.Start(t)                  // stopped when t ends
//		env := m.Seed(ctx, t)                  // VPC, subnets in 3 zones, SGs, role, AMIs, queue...
//		ec2c := ec2.NewFromConfig(m.Config)
//	}
//
// In a TestMain, where there is no testing.TB, use New, SeedCluster and Close instead.
//
// What the front adds to moto, served in moto's own wire protocols so SDK clients cannot tell:
//   - the SSM parameters AWS publishes for EKS-optimized AMIs (/aws/service/eks/..., /aws/service/bottlerocket/...,
//     /aws/service/ami-windows-latest/...), which moto neither has nor lets anyone put; they point
//     at the AMIs of PublishedAMIs, which moto loads at start;
//   - ec2:DescribeCapacityReservations, which moto does not implement, over reservations added with
//     AddCapacityReservation (Seed adds two);
//   - ec2:DescribeInstanceStatus with impaired status checks and scheduled events set with
//     SetInstanceHealth, its status and event filters and its MaxResults paging (moto reports
//     every running instance healthy, with no events, on one page, whatever the filters);
//   - the launch template's security groups on the instances CreateFleet launches (moto puts
//     them in the VPC's default group);
//   - injected failures (FailNext) to exercise throttling and retries, and per-operation call
//     counts (Calls) to check caching.
//
// Faults (faults.go) is a client-side http.RoundTripper for the launch path: it makes CreateFleet
// refuse chosen pools with insufficient-capacity errors, which moto never does, and records each
// CreateFleet.
//
// It is test support only: nothing outside _test.go files may import it, and it must never talk
// to real AWS.
package awstest
