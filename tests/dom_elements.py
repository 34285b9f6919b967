#!/usr/bin/python3
"""Reads a page as a browser rendered it (tests/rendered_page.py) on standard
input and parses it with Python's HTML parser. Prints one JSON object: for
each element with an id, {"text": its text, "style": its style attribute}."""
import json
import sys
from html.parser import HTMLParser


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = {}
        self.open = []  # ids of the elements being read, innermost last

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        element_id = attrs.get("id")
        if element_id is not None:
            self.found[element_id] = {"text": "", "style": attrs.get("style") or ""}
        if tag not in ("meta", "link", "br", "img", "input"):
            self.open.append(element_id)

    def handle_endtag(self, tag):
        if tag not in ("meta", "link", "br", "img", "input") and self.open:
            self.open.pop()

    def handle_data(self, data):
        for element_id in self.open:
            if element_id is not None and element_id in self.found:
                self.found[element_id]["text"] += data


def main():
    parser = Elements()
    parser.feed(sys.stdin.read())
    print(json.dumps(parser.found))


if __name__ == "__main__":
    main()
