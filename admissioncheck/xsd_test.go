package admissioncheck_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// xsdSchema is the part of an XML schema that testdata/junit.xsd uses: global elements, each either of
// a simple type (text only) or of a complex type with a sequence of element references (minOccurs,
// maxOccurs), attributes (some required) and possibly mixed content. validate checks a document against
// those rules; a schema using anything else is refused rather than half read.
type xsdSchema map[string]*xsdElement

type xsdElement struct {
	simple, mixed bool
	sequence      []xsdParticle
	attrs         map[string]bool // name -> required
}

type xsdParticle struct {
	ref      string
	min, max int // max < 0: unbounded
}

// xsdNode is the generic form of the XML read from a schema or a document.
type xsdNode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []xsdNode  `xml:",any"`
	Text     string     `xml:",chardata"`
}

func (n xsdNode) attr(name string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

func parseXSD(data []byte) (xsdSchema, error) {
	var root xsdNode
	if err := xml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	s := xsdSchema{}
	for _, el := range root.Children {
		if el.XMLName.Local != "element" {
			return nil, fmt.Errorf("unsupported schema component %s", el.XMLName.Local)
		}
		name, _ := el.attr("name")
		decl := &xsdElement{attrs: map[string]bool{}}
		s[name] = decl
		if typ, ok := el.attr("type"); ok {
			if typ != "xs:string" {
				return nil, fmt.Errorf("element %s: unsupported type %s", name, typ)
			}
			decl.simple = true
			continue
		}
		for _, ct := range el.Children {
			mixed, _ := ct.attr("mixed")
			decl.mixed = mixed == "true"
			for _, part := range ct.Children {
				switch part.XMLName.Local {
				case "attribute":
					n, _ := part.attr("name")
					use, _ := part.attr("use")
					decl.attrs[n] = use == "required"
				case "sequence":
					for _, ref := range part.Children {
						p, err := particle(ref)
						if err != nil {
							return nil, fmt.Errorf("element %s: %w", name, err)
						}
						decl.sequence = append(decl.sequence, p)
					}
				default:
					return nil, fmt.Errorf("element %s: unsupported %s", name, part.XMLName.Local)
				}
			}
		}
	}
	return s, nil
}

func particle(n xsdNode) (xsdParticle, error) {
	ref, ok := n.attr("ref")
	if !ok {
		return xsdParticle{}, errors.New("a sequence member without ref")
	}
	p := xsdParticle{ref: ref, min: 1, max: 1}
	if v, ok := n.attr("minOccurs"); ok {
		p.min, _ = strconv.Atoi(v)
	}
	if v, ok := n.attr("maxOccurs"); ok {
		if v == "unbounded" {
			p.max = -1
		} else {
			p.max, _ = strconv.Atoi(v)
		}
	}
	return p, nil
}

// validate checks doc against s: a declared root element, declared attributes with the required ones
// present, children in the declared sequence and counts, text only where the content is mixed or simple.
func (s xsdSchema) validate(doc []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var root xsdNode
	if err := dec.Decode(&root); err != nil {
		return err
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if cd, ok := tok.(xml.CharData); !ok || strings.TrimSpace(string(cd)) != "" {
			return errors.New("content after the root element")
		}
	}
	return s.element(root, root.XMLName.Local)
}

func (s xsdSchema) element(n xsdNode, path string) error {
	decl, ok := s[n.XMLName.Local]
	if !ok {
		return fmt.Errorf("%s: element not declared", path)
	}
	for _, a := range n.Attrs {
		if _, ok := decl.attrs[a.Name.Local]; !ok {
			return fmt.Errorf("%s: attribute %s not declared", path, a.Name.Local)
		}
	}
	for name, required := range decl.attrs {
		if _, ok := n.attr(name); required && !ok {
			return fmt.Errorf("%s: required attribute %s missing", path, name)
		}
	}
	if decl.simple {
		if len(n.Children) > 0 {
			return fmt.Errorf("%s: a text-only element has child elements", path)
		}
		return nil
	}
	if !decl.mixed && strings.TrimSpace(n.Text) != "" {
		return fmt.Errorf("%s: text in element-only content", path)
	}
	i := 0
	for _, p := range decl.sequence {
		count := 0
		for i < len(n.Children) && n.Children[i].XMLName.Local == p.ref && (p.max < 0 || count < p.max) {
			if err := s.element(n.Children[i], fmt.Sprintf("%s/%s[%d]", path, p.ref, count)); err != nil {
				return err
			}
			i++
			count++
		}
		if count < p.min {
			return fmt.Errorf("%s: %d %s elements, want at least %d", path, count, p.ref, p.min)
		}
	}
	if i < len(n.Children) {
		return fmt.Errorf("%s: element %s not allowed here", path, n.Children[i].XMLName.Local)
	}
	return nil
}
