using Xunit;

namespace TodoApi.Tests;

public class TodoStoreTests
{
    [Fact]
    public void Add_GivesTheNextIdAndTrimsTheTitle()
    {
        var store = new TodoStore();

        var todo = store.Add("  Test the QA  ");

        Assert.Equal(new Todo(3, "Test the QA", false), todo);
        Assert.Equal(todo, store.Find(3));
    }
}
