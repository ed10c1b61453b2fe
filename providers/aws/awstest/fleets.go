package awstest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// createFleet forwards CreateFleet to moto, then gives every instance it launched the security
// groups of its launch template, as EC2 does: moto launches fleet instances into the VPC's
// default security group whatever the template says.
func (f *front) createFleet(w http.ResponseWriter, r *http.Request, body []byte) {
	resp, out, err := f.callMoto(r, body)
	if err != nil {
		if r.Context().Err() == nil {
			http.Error(w, "awstest: forward CreateFleet to moto: "+err.Error(), http.StatusBadGateway)
		}
		return
	}
	if resp.StatusCode == http.StatusOK {
		if err := f.applyTemplateGroups(r, out); err != nil {
			writeError(w, "ec2", http.StatusInternalServerError, "InternalError", "awstest: give fleet instances their launch template's security groups: "+err.Error())
			return
		}
	}
	for k, vs := range resp.Header {
		if k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// fleetResponse is what applyTemplateGroups reads of a CreateFleet answer.
type fleetResponse struct {
	Instances []struct {
		TemplateID   string   `xml:"launchTemplateAndOverrides>launchTemplateSpecification>launchTemplateId"`
		TemplateName string   `xml:"launchTemplateAndOverrides>launchTemplateSpecification>launchTemplateName"`
		Version      string   `xml:"launchTemplateAndOverrides>launchTemplateSpecification>version"`
		InstanceIDs  []string `xml:"instanceIds>item"`
	} `xml:"fleetInstanceSet>item"`
}

// templateVersions is what applyTemplateGroups reads of a DescribeLaunchTemplateVersions answer.
type templateVersions struct {
	Versions []struct {
		SecurityGroupIDs []string `xml:"launchTemplateData>securityGroupIdSet>item"`
	} `xml:"launchTemplateVersionSet>item"`
}

// applyTemplateGroups sets, on each instance of a CreateFleet answer, the security groups of the
// launch template version it was launched from (when the template names any).
func (f *front) applyTemplateGroups(r *http.Request, answer []byte) error {
	var fleet fleetResponse
	if err := xml.Unmarshal(answer, &fleet); err != nil {
		return fmt.Errorf("read the CreateFleet answer: %w", err)
	}
	groups := map[string][]string{}
	for _, item := range fleet.Instances {
		if item.TemplateID == "" && item.TemplateName == "" {
			continue
		}
		version := item.Version
		if version == "" {
			version = "$Default"
		}
		key := item.TemplateID + "/" + item.TemplateName + "/" + version
		ids, ok := groups[key]
		if !ok {
			form := url.Values{"Action": {"DescribeLaunchTemplateVersions"}, "Version": {"2016-11-15"}, "LaunchTemplateVersion.1": {version}}
			if item.TemplateID != "" {
				form.Set("LaunchTemplateId", item.TemplateID)
			} else {
				form.Set("LaunchTemplateName", item.TemplateName)
			}
			var versions templateVersions
			if err := f.ec2Call(r, form, &versions); err != nil {
				return err
			}
			if len(versions.Versions) > 0 {
				ids = versions.Versions[0].SecurityGroupIDs
			}
			groups[key] = ids
		}
		if len(ids) == 0 {
			continue
		}
		for _, instance := range item.InstanceIDs {
			form := url.Values{"Action": {"ModifyInstanceAttribute"}, "Version": {"2016-11-15"}, "InstanceId": {instance}}
			for i, id := range ids {
				form.Set("GroupId."+strconv.Itoa(i+1), id)
			}
			if err := f.ec2Call(r, form, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// ec2Call sends an EC2 action to moto with the headers of the client's request r (moto reads the
// service from the Authorization header and does not check signatures) and decodes the answer
// into out (when not nil).
func (f *front) ec2Call(r *http.Request, form url.Values, out any) error {
	resp, body, err := f.callMoto(r, []byte(form.Encode()))
	if err != nil {
		return fmt.Errorf("%s: %w", form.Get("Action"), err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: moto answered %s: %s", form.Get("Action"), resp.Status, body)
	}
	if out == nil {
		return nil
	}
	if err := xml.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: read the answer: %w", form.Get("Action"), err)
	}
	return nil
}

// callMoto sends body to moto as r would have been sent, and returns the answer read in full.
func (f *front) callMoto(r *http.Request, body []byte) (*http.Response, []byte, error) {
	target := *f.moto
	target.Path, target.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Content-Length")
	req.ContentLength = int64(len(body))
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	return resp, out, nil
}
