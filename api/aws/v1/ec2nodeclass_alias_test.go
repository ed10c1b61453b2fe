package v1

import (
	"testing"
)

func TestParseAlias(t *testing.T) {
	tests := []struct {
		in      string
		want    Alias
		wantErr bool
	}{
		{in: "al2023@latest", want: Alias{Family: AMIFamilyAL2023, Version: "latest"}},
		{in: "al2@v20240625", want: Alias{Family: AMIFamilyAL2, Version: "v20240625"}},
		{in: "bottlerocket@v1.10.0", want: Alias{Family: AMIFamilyBottlerocket, Version: "v1.10.0"}},
		{in: "windows2019@latest", want: Alias{Family: AMIFamilyWindows2019, Version: "latest"}},
		{in: "windows2022@latest", want: Alias{Family: AMIFamilyWindows2022, Version: "latest"}},
		{in: "windows2025@latest", want: Alias{Family: AMIFamilyWindows2025, Version: "latest"}},
		{in: "windows2022@v1", wantErr: true},
		{in: "ubuntu@latest", wantErr: true},
		{in: "AL2023@latest", wantErr: true},
		{in: "al2023", wantErr: true},
		{in: "al2023@", wantErr: true},
		{in: "@latest", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAlias(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseAlias(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("ParseAlias(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if err == nil && got.String() != tt.in {
				t.Fatalf("ParseAlias(%q).String() = %q, want the input back", tt.in, got.String())
			}
		})
	}
}

func TestAMIFamily(t *testing.T) {
	custom := AMIFamilyCustom
	al2 := AMIFamilyAL2
	tests := []struct {
		name      string
		spec      EC2NodeClassSpec
		want      string
		wantAlias bool
	}{
		{
			name:      "family from alias",
			spec:      EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{Alias: "bottlerocket@latest"}}},
			want:      AMIFamilyBottlerocket,
			wantAlias: true,
		},
		{
			name:      "explicit family wins over alias",
			spec:      EC2NodeClassSpec{AMIFamily: &custom, AMISelectorTerms: []AMISelectorTerm{{Alias: "al2023@latest"}}},
			want:      AMIFamilyCustom,
			wantAlias: true,
		},
		{
			name: "explicit family without alias",
			spec: EC2NodeClassSpec{AMIFamily: &al2, AMISelectorTerms: []AMISelectorTerm{{ID: "ami-0123"}}},
			want: AMIFamilyAL2,
		},
		{
			name: "neither falls back to custom",
			spec: EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{Tags: map[string]string{"a": "b"}}}},
			want: AMIFamilyCustom,
		},
		{
			name: "unparseable alias falls back to custom",
			spec: EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{Alias: "ubuntu@latest"}}},
			want: AMIFamilyCustom,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := &EC2NodeClass{Spec: tt.spec}
			if got := nc.AMIFamily(); got != tt.want {
				t.Fatalf("AMIFamily() = %q, want %q", got, tt.want)
			}
			if _, ok := nc.Alias(); ok != tt.wantAlias {
				t.Fatalf("Alias() ok = %v, want %v", ok, tt.wantAlias)
			}
		})
	}
}

func TestRestrictedTagPatterns(t *testing.T) {
	restricted := []string{
		"eks:eks-cluster-name",
		"kubernetes.io/cluster/my-cluster",
		"karpenter.sh/nodepool",
		"karpenter.sh/nodeclaim",
		"karpenter.k8s.aws/ec2nodeclass",
	}
	allowed := []string{"team", "Name", "karpenter.sh/discovery", "kubernetes.io/role", "eks:nodegroup-name"}
	matches := func(key string) bool {
		for _, re := range RestrictedTagPatterns {
			if re.MatchString(key) {
				return true
			}
		}
		return false
	}
	for _, key := range restricted {
		if !matches(key) {
			t.Errorf("tag key %q should be restricted", key)
		}
	}
	for _, key := range allowed {
		if matches(key) {
			t.Errorf("tag key %q should be allowed", key)
		}
	}
}
