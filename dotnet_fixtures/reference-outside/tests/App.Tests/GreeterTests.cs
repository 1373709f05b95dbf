using Xunit;

namespace App.Tests;

public class GreeterTests
{
    [Fact]
    public void Greet_NamesThePerson()
    {
        var greeter = new Greeter();

        Assert.Equal("Hello, Ada!", greeter.Greet("Ada"));
    }
}
