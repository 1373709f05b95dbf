"""The C# test scanner on source texts: what is a test, its class, its assertions and skip calls,
and what strings, comments, char literals and preprocessor lines must not change."""

from __future__ import annotations

import pytest

from specops_dag.validation.csharp import blank, scan

HEAD = "using Xunit;\n\nnamespace Calc.Tests;\n\n"


def shape(text: str) -> list[tuple[str, int, int, tuple[tuple[str, int], ...]]]:
    """(Class.Method, line, assertions, skip calls) of every test of `text`."""
    return [(t.full_name, t.line, t.assertions, t.skip_calls) for t in scan(HEAD + text, "a.cs")]


SOURCES = [
    pytest.param("""\
public class T
{
    // [Fact] public void Commented() { }
    /* [Fact]
       public void Blocked() { Assert.True(false); } */
    [Fact]
    public void Strings()
    {
        var a = "Assert.True(x); } [Fact]";
        var b = @"C:\\dir\\"; Assert.NotNull(b);
        var v = @"first
            Assert.Fail(); "" }";
        var c = \"\"\"
            raw Assert.Fail(); " }
            \"\"\";
        var d = $"{map["k"]} Assert.Null(x) {{";
        var e = '{'; var f = '"'; Assert.True(f != '\\'');
        Assert.Equal(1, a.Length); // Assert.True(false);
    }
}
""", [("T.Strings", 11, 3, ())], id="strings-comments-and-chars-count-nothing"),
    pytest.param("""\
public class T
{
    [Fact]
    public void Arrow() => Assert.Equal(2, 1 + 1);

    [Fact]
    public async Task Generic()
    {
        await Assert.ThrowsAsync<ArgumentException>(() => Run());
        Assert.Throws<InvalidOperationException>(() => Run());
        CollectionAssert.AreEqual(a, b);
        StringAssert.Contains("x", s);
        mock.Verify(m => m.Run(), Times.Once());
        result.Should().Be(3);
        result.ShouldBe(3);
        sender.Received(1).Send(Arg.Any<string>());
        AssertValid(result);
        Assert.Pass();
    }

    [Fact]
    public void Inconclusive()
    {
        Assert.Inconclusive("later");
        Assert.Skip("later");
        Skip.If(true);
    }
}
""", [("T.Arrow", 8, 1, ()), ("T.Generic", 11, 9, ()),
      ("T.Inconclusive", 26, 0, (("Assert.Inconclusive", 28), ("Assert.Skip", 29),
                                 ("Skip.If", 30)))], id="assertion-forms-and-skip-calls"),
    pytest.param("""\
[TestFixture]
public class Outer
{
    public class Inner
    {
        [Test]
        public void Deep() { Assert.That(1, Is.EqualTo(1)); }
    }

    [Xunit.FactAttribute]
    public void Qualified() { }

    [Trait("Category", "Slow"), Fact]
    public void Listed() { }

    [Fact]
    public int NotATestBody { get; } = 1;

    public void Helper() { Assert.True(true); }
}
""", [("Inner.Deep", 11, 1, ()), ("Outer.Qualified", 15, 0, ()), ("Outer.Listed", 18, 0, ())],
                 id="classes-and-attributes"),
    pytest.param("""\
public class T
{
#if DEBUG
    [Fact]
    public void OnlyInDebug() { Assert.True(Debug()); }
#endif
    [Theory]
    [InlineData("{", 1)]
    public void Braces(string s, int n) { Assert.Equal(n, s.Length); }
}
""", [("T.OnlyInDebug", 9, 1, ()), ("T.Braces", 13, 1, ())], id="preprocessor-and-data"),
]


@pytest.mark.parametrize(("text", "expected"), SOURCES)
def test_the_scanner_finds_tests_their_assertions_and_skip_calls(text: str, expected) -> None:
    assert shape(text) == expected


def test_the_body_hash_ignores_whitespace_and_comments_but_not_code() -> None:
    def body_hash(body: str) -> str:
        return scan(f"class T {{ [Fact] public void M() {body} }}", "a.cs")[0].body_hash

    same = body_hash("{ Assert.Equal(1, x); }")
    assert body_hash("{\n    Assert.Equal( 1,x ); // one\n}") == same
    assert body_hash("{ Assert.Equal(2, x); }") != same


def test_blanking_keeps_offsets_and_newlines() -> None:
    text = 'a = "x\\"y"; // c\n/* d\ne */ b = @"p""q";\n#region r\n'
    code, uncommented = blank(text)
    assert len(code) == len(text) and code.count("\n") == text.count("\n")
    gap = " " * 4  # `// c`, `/* d`, `e */`
    assert code == f"a = {' ' * 6}; {gap}\n{gap}\n{gap} b = {' ' * 7};\n{' ' * 9}\n"
    assert uncommented == f'a = "x\\"y"; {gap}\n{gap}\n{gap} b = @"p""q";\n{" " * 9}\n'


def test_attributes_keep_their_arguments_as_written_and_blanked() -> None:
    test = scan('class T { [Trait("Category", "Slow"), Fact(Skip = "a = b")] void M() { } }',
                "a.cs")[0]
    trait, fact = test.attributes
    assert (trait.name, trait.strings(), trait.line) == ("Trait", ["Category", "Slow"], 1)
    assert (fact.name, fact.args, fact.code) == ("Fact", 'Skip = "a = b"', "Skip =        ")
